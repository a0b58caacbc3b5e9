"""Live training monitor: ranks publish progress and engine events, the kernel merges them for display."""
from .monitor import Monitor, cell_key, stragglers
from .samples import monitor_step

step = monitor_step  # hvd.monitor.step(samples), for custom training loops

__all__ = ["Monitor", "cell_key", "monitor_step", "step", "stragglers"]
