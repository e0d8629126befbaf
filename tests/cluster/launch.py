#!/usr/bin/env python3
"""launch.py — the test cluster's stand-in for ssh, for mpirun and hydra.

A process in one node's PID namespace cannot enter the other node's (the
nodes' namespaces are siblings), so the agent asks a helper: one per node,
started by cluster.sh from the machine's own PID namespace, listening on a
Unix socket in that node's private /run (reachable from that node only).
The agent hands over its stdin, stdout and stderr and the command line; the
helper enters the target node's namespaces (network, mount, UTS, IPC, PID,
cgroup), runs the command there with a login's environment, like ssh does,
and answers with its exit status.  If the agent goes away (mpirun kills it
when it aborts), the helper kills the command's process group.

  launch.py serve CLUSTER_DIR NODE   the helper of NODE (runs until killed)
  launch.py agent [-x|-q|-T|-o opt]... HOST COMMAND...   (what ssh is called with)
"""
import ctypes, json, os, select, signal, socket, struct, sys, time

SOCK = "/run/strata-launch.sock"
NS = ["ipc", "uts", "net", "cgroup", "pid", "mnt"]   # mnt last: paths resolve before it
libc = ctypes.CDLL(None, use_errno=True)


def setns(fd):
    if libc.setns(fd, 0) != 0:
        e = ctypes.get_errno()
        raise OSError(e, os.strerror(e))


def serve(cluster_dir, node):
    nodes = {}
    for f in os.listdir(cluster_dir):
        if f.endswith(".pid"):
            pid = open(os.path.join(cluster_dir, f)).read().strip()
            node_ns = nodes[f[:-4]] = {n: os.open(f"/proc/{pid}/ns/{n}", os.O_RDONLY) for n in NS}
            # the node's cgroups, opened while this machine's paths still resolve
            cgs = open(os.path.join(cluster_dir, f[:-4] + ".cgroups")).read().split()
            node_ns["procs"] = [os.open(os.path.join(cg, "cgroup.procs"), os.O_WRONLY) for cg in cgs]
    setns(nodes[node]["mnt"])   # only the mount namespace: the socket is the node's
    os.chdir("/")
    try:
        os.unlink(SOCK)
    except FileNotFoundError:
        pass
    srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    srv.bind(SOCK)
    os.chmod(SOCK, 0o600)
    srv.listen(16)
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)   # handlers are reaped by the kernel
    while True:
        conn, _ = srv.accept()
        if os.fork() == 0:
            srv.close()
            handle(conn, nodes)
            os._exit(0)
        conn.close()


def handle(conn, nodes):
    signal.signal(signal.SIGCHLD, signal.SIG_DFL)
    msg, fds, _, _ = socket.recv_fds(conn, 65536, 3)
    req = json.loads(msg.decode())
    host = req["host"]
    if host not in nodes or len(fds) != 3:
        os.write(fds[2] if fds else 2, f"launch: no node {host!r} (nodes: {' '.join(sorted(nodes))})\n".encode())
        conn.sendall(struct.pack("i", 255))
        return
    # The node's cgroups first, so the command counts against the node as a
    # process started there would.
    for fd in nodes[host]["procs"]:
        os.write(fd, str(os.getpid()).encode())
    for n in NS:
        setns(nodes[host][n])
    child = os.fork()   # the first process that is inside the target PID namespace
    if child == 0:
        os.setsid()
        for i, fd in enumerate(fds):
            os.dup2(fd, i)
        os.chdir("/root" if os.path.isdir("/root") else "/")
        env = {"PATH": "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
               "HOME": "/root", "USER": "root", "LOGNAME": "root", "SHELL": "/bin/sh"}
        os.execve("/bin/sh", ["sh", "-c", req["command"]], env)
    for fd in fds:
        os.close(fd)
    while True:
        pid, status = os.waitpid(child, os.WNOHANG)
        if pid:
            code = os.waitstatus_to_exitcode(status)
            conn.sendall(struct.pack("i", code if code >= 0 else 128 - code))
            return
        r, _, _ = select.select([conn], [], [], 0.2)
        if r and not conn.recv(1):   # the agent is gone: so is the session
            for sig in (signal.SIGTERM, signal.SIGKILL):
                try:
                    os.killpg(child, sig)
                except ProcessLookupError:
                    break
                time.sleep(0.5)
            os.waitpid(child, 0)
            return


def agent(args):
    while args and args[0].startswith("-"):
        opt = args.pop(0)
        if opt in ("-o", "-p", "-l", "-i", "-F") and args:
            args.pop(0)
    if len(args) < 2:
        sys.exit("launch: usage: launch.py agent HOST COMMAND...")
    host, command = args[0], " ".join(args[1:])
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        s.connect(SOCK)
    except OSError as e:
        sys.exit(f"launch: no launch helper on this node ({SOCK}: {e.strerror})")
    socket.send_fds(s, [json.dumps({"host": host, "command": command}).encode()], [0, 1, 2])
    data = b""
    while len(data) < 4:
        chunk = s.recv(4 - len(data))
        if not chunk:
            sys.exit(f"launch: the helper for {host} went away")
        data += chunk
    sys.exit(struct.unpack("i", data)[0])


if __name__ == "__main__":
    if len(sys.argv) >= 4 and sys.argv[1] == "serve":
        serve(sys.argv[2], sys.argv[3])
    elif len(sys.argv) >= 2 and sys.argv[1] == "agent":
        agent(sys.argv[2:])
    else:
        sys.exit(__doc__)
