"""These files run inside the verl environments (tests/integrations/test_verl_envs.py runs
them there); an interpreter without verl does not collect them."""

import importlib.util

if importlib.util.find_spec("verl") is None:
    collect_ignore_glob = ["test_*.py"]
