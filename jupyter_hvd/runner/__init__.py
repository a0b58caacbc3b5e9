"""Launchers that start training ranks under Open MPI's mpiexec."""
