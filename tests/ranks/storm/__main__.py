"""``PYTHONPATH=tests/ranks hvdrun -np N python -m storm --seed S --ops K``: one storm on N ranks."""
import sys

from .runner import main

sys.exit(main())
