#!/usr/bin/env bash
# git.sh — git on a generated repository: 400 commits through fast-import
# plus a few ordinary commits, then log, gc, fsck and a diff.  With fixed
# dates and identity, commit ids are deterministic, so the same outputs
# must come out with and without Strata.
source "$(dirname "$0")/common.sh"
command -v git >/dev/null || fail "git missing (apt-get install git)"

export GIT_AUTHOR_NAME=Strata GIT_AUTHOR_EMAIL=strata@example.org
export GIT_COMMITTER_NAME=Strata GIT_COMMITTER_EMAIL=strata@example.org
export GIT_AUTHOR_DATE="1700000000 +0000" GIT_COMMITTER_DATE="1700000000 +0000"
export GIT_CONFIG_NOSYSTEM=1 HOME="$WORK"

# A fast-import stream: 400 commits on 40 files that keep changing.
make_stream() {
  local i f
  for ((i = 1; i <= 400; i++)); do
    echo "commit refs/heads/main"
    echo "committer Strata <strata@example.org> $((1700000000 + i)) +0000"
    echo "data <<EOM"; echo "commit $i"; echo "EOM"
    for ((f = i % 40; f < 40; f += 13)); do
      echo "M 644 inline dir$((f % 5))/file$f.txt"
      echo "data <<EOF"
      seq $i $((i + f * 3)) | tr '\n' ' '; echo
      echo "EOF"
    done
    echo
  done
}
make_stream > "$WORK/stream"

run_git() {   # run_git DIR: build the repository and print everything we compare
  local dir=$1
  git init -q "$dir"
  cd "$dir"
  git symbolic-ref HEAD refs/heads/main       # (git init -b needs git >= 2.28)
  git fast-import --quiet < "$WORK/stream"
  git checkout -q main
  for i in 1 2 3 4 5; do
    seq 1 $((i * 1000)) > "big$i.txt"
    git add "big$i.txt"
    git commit -q -m "big file $i"
  done
  git log --format='%H %s' | head -50
  git rev-list --count HEAD
  git log --stat --format=%h | md5sum
  git diff HEAD~100 HEAD --stat | tail -1
  git gc --quiet
  git fsck --full --no-progress && echo "fsck clean"
  git count-objects -v | grep -E '^(count|in-pack|packs)'
  git cat-file -p HEAD~200:dir1/file6.txt | md5sum
}

(run_git "$WORK/plain") > "$WORK/plain.out" 2>"$WORK/plain.err" || { cat "$WORK/plain.err" >&2; fail "git failed without Strata"; }
: > "$WORK/err"
(export LD_PRELOAD="$LIB" STRATA_SHOW_STATS=1; run_git "$WORK/strata") > "$WORK/strata.out" 2>>"$WORK/err" \
  || { tail -40 "$WORK/err" >&2; fail "git failed under Strata"; }
same "$WORK/plain.out" "$WORK/strata.out" "git output"
grep -q '^405$' "$WORK/strata.out" || fail "expected 405 commits"
check_preloaded "$WORK/err" 1000
echo "git: $(sed -n 51p "$WORK/strata.out") commits, identical log/fsck/gc output"
