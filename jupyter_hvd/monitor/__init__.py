"""Live training monitor: ranks publish progress and engine events, the kernel merges them for display."""
from .monitor import Monitor, cell_key, stragglers
from .samples import monitor_step

__all__ = ["Monitor", "cell_key", "monitor_step", "stragglers"]
