"""Process supervision for the local demo: every daemon in its own process group, its output in
one log file per daemon, and everything stopped (SIGTERM, then SIGKILL) on exit, on an error and
on Ctrl-C, so a run leaves no stray processes, sockets or files behind."""
import os
import signal
import subprocess
import time


class StartError(RuntimeError):
    pass


class Supervisor:
    def __init__(self, log_dir):
        self.log_dir = log_dir
        self.procs = []  # (name, Popen, log file)
        os.makedirs(log_dir, exist_ok=True)

    def start(self, name, argv, env=None):
        log = open(os.path.join(self.log_dir, name + ".log"), "ab")
        log.write(("$ " + " ".join(argv) + "\n").encode())
        log.flush()
        proc = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                start_new_session=True, env=env)
        self.procs.append((name, proc, log))
        return proc

    def check_alive(self):
        """Raises StartError naming the first daemon that has exited."""
        for name, proc, _ in self.procs:
            if proc.poll() is not None:
                raise StartError(f"{name} exited with status {proc.returncode}; see "
                                 f"{os.path.join(self.log_dir, name + '.log')}")

    def wait_for_file(self, path, name, timeout=30.0):
        """Waits until a daemon writes a non-empty file (a --port-file or kubeconfig)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if os.path.exists(path) and os.path.getsize(path) > 0:
                return open(path).read().strip()
            self.check_alive()
            time.sleep(0.02)
        raise StartError(f"{name} did not write {path} within {timeout:.0f} s")

    def wait_for_log(self, name, needle, timeout=30.0):
        """Waits until a daemon's log contains `needle`; returns the line holding it."""
        path = os.path.join(self.log_dir, name + ".log")
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            with open(path, errors="replace") as f:
                for line in f:
                    if needle in line:
                        return line.strip()
            self.check_alive()
            time.sleep(0.02)
        raise StartError(f"{name} did not log '{needle}' within {timeout:.0f} s")

    def stop_all(self, grace=5.0):
        """Stops the daemons in reverse start order, each with SIGTERM to its process group and
        SIGKILL after `grace` seconds, so a daemon never outlives what it talks to (reconfig-mgr
        stops before the chassis, everything before the API server). Returns the names of the
        daemons that needed SIGKILL."""
        killed = []
        for name, proc, log in reversed(self.procs):
            if proc.poll() is None:
                try:
                    os.killpg(proc.pid, signal.SIGTERM)
                except ProcessLookupError:
                    pass
                try:
                    proc.wait(timeout=grace)
                except subprocess.TimeoutExpired:
                    killed.append(name)
                    try:
                        os.killpg(proc.pid, signal.SIGKILL)
                    except ProcessLookupError:
                        pass
                    proc.wait()
            log.close()
        self.procs = []
        return killed
