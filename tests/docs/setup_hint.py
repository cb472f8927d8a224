"""python/setup.py on an interpreter without the wheel package (a pyenv python3): pip's
metadata step must stop with a message naming the interpreter and the fix, not setuptools'
bare "invalid command 'bdist_wheel'". Simulated here by hiding wheel from this interpreter."""
import os
import subprocess
import sys

setup = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))),
                     "python", "setup.py")
code = ("import sys; sys.modules['wheel'] = None; sys.argv = ['setup.py', 'dist_info']; "
        f"__file__ = {setup!r}; exec(compile(open(__file__).read(), __file__, 'exec'))")
p = subprocess.run([sys.executable, "-c", code], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                   text=True, cwd=os.path.dirname(setup), timeout=120)
want = f"gpuwrap setup: {sys.executable} has no wheel package"
if p.returncode == 0 or want not in p.stdout or "venv" not in p.stdout:
    sys.exit(f"FAIL: exit {p.returncode}, want non-zero and '{want}' with the venv hint; output:\n{p.stdout}")
print("ok:", p.stdout.strip().splitlines()[-1])
