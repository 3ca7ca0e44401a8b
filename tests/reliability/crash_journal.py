#!/usr/bin/env python3
"""Trials of the crash journal (docs/prep.md, "A crash costs one run").

Each trial prepares (or warm-starts) twelve generated programs on two
workers, not isolated, in a fresh cache folder:

  crash  the test fault (KILN_TEST_FAULT=crash:NAME, a test build) at a
         random program, left set as a driver's bug would be: the first run
         must die of SIGSEGV, the second must not die, skip the victim with
         its line and exit 1, the third must not die and exit 0 (the ledger
         answers), and --retry-failed without the fault must build the rest.
  kill   a prepare killed with SIGKILL at a random moment: the next run must
         not die and skip at most two programs (the workers' builds in
         flight); --retry-failed then exits 0; a last run compiles nothing
         and skips nothing as crashed.

usage: tests/reliability/crash_journal.py PATH/TO/kiln-faults [TRIALS]
(kiln-faults: the test build's kiln with the test faults, beside build/kiln)
Prints one line per trial and a summary; exits 1 when a trial failed.
"""
import json
import os
import random
import shutil
import signal
import struct
import subprocess
import sys
import tempfile
import time

N = 12


def run(kiln, args, fault=None):
    env = dict(os.environ)
    env.pop("KILN_TEST_FAULT", None)
    if fault:
        env["KILN_TEST_FAULT"] = fault
    p = subprocess.run([kiln] + args + ["--json"], env=env, capture_output=True, text=True,
                       timeout=600)
    try:
        out = json.loads(p.stdout) if p.stdout.strip() else {}
    except json.JSONDecodeError:
        out = {}
    return p.returncode, out, p.stderr


def names():
    return ["gen-%06d-%s" % (i, "compute" if i % 2 == 0 else "graphics") for i in range(N)]


def crash_trial(kiln, root, rng, start):
    cache = os.path.join(root, "c")
    shutil.rmtree(cache, ignore_errors=True)
    if start:
        rc, _, _ = run(kiln, ["prepare", "--generate", str(N), "--cache", cache, "--no-vulkan"])
        if rc != 0:
            return "setup failed"
        victim = start_victim(kiln, cache, rng)
        cmd = ["start", "--cache", cache, "--jobs", "2"]
    else:
        victim = rng.choice(names())
        cmd = ["prepare", "--generate", str(N), "--cache", cache, "--jobs", "2"]
    fault = "crash:" + victim
    rc, _, _ = run(kiln, cmd, fault)
    if rc != -signal.SIGSEGV:
        return "first run: rc %d, not SIGSEGV" % rc
    rc, out, err = run(kiln, cmd, fault)
    skipped = out.get("crash_skipped", -1)
    # Every run names a program by its key ("program <hex>"), prepare with
    # the source's own name after it: "program <hex> (gen-...): ...".
    said = (victim + ": not built: it was being built") in err or \
        ("(" + victim + "): not built: it was being built") in err
    if rc != 1 or not (1 <= skipped <= 2) or not said:
        return "second run: rc %d, crash_skipped %d" % (rc, skipped)
    if out.get("pipelines_built") != N - skipped:
        return "second run built %s" % out.get("pipelines_built")
    rc, out, _ = run(kiln, cmd, fault)
    if rc != 0 or out.get("ledger_failed") != skipped:
        return "third run: rc %d, ledger_failed %s" % (rc, out.get("ledger_failed"))
    rc, out, _ = run(kiln, cmd + ["--retry-failed"])
    if rc != 0:
        return "retry: rc %d" % rc
    return None


def start_victim(kiln, cache, rng):
    """The key a start names a random program by ("program <hex>"): a
    prepare of a copy crashed at that program on one worker leaves it in
    its journal's first slot."""
    probe = cache + "-probe"
    shutil.rmtree(probe, ignore_errors=True)
    shutil.copytree(cache, probe)
    run(kiln, ["prepare", "--generate", str(N), "--cache", probe, "--jobs", "1"],
        "crash:" + rng.choice(names()))
    b = open(os.path.join(probe, "inflight-0.kpj"), "rb").read()
    shutil.rmtree(probe, ignore_errors=True)
    lo, hi = struct.unpack("<QQ", b[136:152])
    return "program %016x%016x" % (hi, lo)


def kill_trial(kiln, root, rng):
    cache = os.path.join(root, "k")
    shutil.rmtree(cache, ignore_errors=True)
    cmd = ["prepare", "--generate", str(N), "--cache", cache, "--jobs", "2"]
    # Translation first, so the kill lands in the pipeline phase most often.
    rc, _, _ = run(kiln, cmd[:-2] + ["--no-vulkan"])
    if rc != 0:
        return "setup failed", None
    p = subprocess.Popen([kiln] + cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                         env={k: v for k, v in os.environ.items() if k != "KILN_TEST_FAULT"})
    time.sleep(rng.uniform(0.0, 1.5))
    killed = p.poll() is None
    p.send_signal(signal.SIGKILL)
    p.wait()
    rc, out, _ = run(kiln, cmd)
    skipped = out.get("crash_skipped", -1)
    if rc not in (0, 1) or not (0 <= skipped <= 2) or (rc == 1) != (skipped > 0):
        return "after the kill: rc %d, crash_skipped %d" % (rc, skipped), killed
    rc, out, _ = run(kiln, cmd + ["--retry-failed"])
    if rc != 0:
        return "retry: rc %d" % rc, killed
    rc, out, _ = run(kiln, cmd)
    if rc != 0 or out.get("crash_skipped") != 0 or out.get("driver_compiles") != 0:
        return "last run: rc %d, %s" % (rc, out.get("driver_compiles")), killed
    return None, (killed, skipped)


def main():
    kiln = sys.argv[1]
    trials = int(sys.argv[2]) if len(sys.argv) > 2 else 10
    rng = random.Random(int(os.environ.get("SEED", "1")))
    root = tempfile.mkdtemp(prefix="kiln-journal-")
    bad = 0
    counts = {"prepare": 0, "start": 0, "kill": 0, "kill_mid": 0, "kill_suspects": 0}
    try:
        for t in range(trials):
            for kind in ("prepare", "start"):
                why = crash_trial(kiln, root, rng, kind == "start")
                counts[kind] += 1
                print("crash %s %d: %s" % (kind, t, why or "ok"), flush=True)
                bad += why is not None
            why, info = kill_trial(kiln, root, rng)
            counts["kill"] += 1
            if why is None:
                counts["kill_mid"] += info[0]
                counts["kill_suspects"] += info[1] > 0
            print("kill %d: %s" % (t, why or "ok %s" % (info,)), flush=True)
            bad += why is not None
    finally:
        shutil.rmtree(root, ignore_errors=True)
    print("summary: %s, %d failed" % (counts, bad))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
