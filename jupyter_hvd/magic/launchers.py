"""ipyparallel's launchers for a job's controller and its mpiexec, with the command line and environment of
runner.launch, and their output readable whole at any time.

ipyparallel's own launchers read a process's output file once, keep that text, and remove the file when they
learn that the process exited, on their event loop thread. The kernel learns of the exit at that same moment
(the launcher's state) and reads the output then, to find which host Open MPI's launcher says it lost: racing
the removal, it could find no file, take '' for the output, and report "mpiexec died" for a lost host. A read
while the process ran kept a part of the output for good. Here every read reads the whole file, and the file
stays until RankCluster.stop() removes the job's folder.
"""
from __future__ import annotations

from dataclasses import replace

from ipyparallel.cluster.launcher import LocalControllerLauncher, MPIEngineSetLauncher
from traitlets import Any as AnyTrait

from ..runner.launch import mpiexec_command


class _WholeOutput:
    """A launcher whose get_output() reads its process's output file whole, and never removes it."""

    output_file: str

    def get_output(self, remove: bool = False) -> str:  # remove is ignored: the job's folder goes at stop
        try:
            with open(self.output_file, errors="replace") as f:
                return f.read()
        except FileNotFoundError:  # not started yet, or the job was stopped
            return ""


class ControllerLauncher(_WholeOutput, LocalControllerLauncher):
    """ipyparallel's controller launcher, its output read whole."""


class RankLauncher(_WholeOutput, MPIEngineSetLauncher):
    """ipyparallel's mpiexec engine launcher, with the command line and environment of runner.launch."""

    launch_spec = AnyTrait()

    def _command(self) -> tuple[list[str], dict[str, str]]:
        spec = replace(self.launch_spec, env={**self.launch_spec.env, **super().get_env()})
        return mpiexec_command(spec, self.program + self.program_args)

    def find_args(self) -> list[str]:
        return self._command()[0]

    def get_env(self) -> dict[str, str]:
        return self._command()[1]
