#!/bin/sh
# norandom.sh PROGRAM [ARGS...] — runs PROGRAM without address-space
# randomization when setarch is allowed to do that, else as it is.  TSan
# (gcc 12/13) cannot place its shadow memory on kernels that randomize mmap
# with 32 bits (vm.mmap_rnd_bits = 32, as Ubuntu 24.04 does).
if setarch "$(uname -m)" -R true 2>/dev/null; then
  exec setarch "$(uname -m)" -R "$@"
fi
exec "$@"
