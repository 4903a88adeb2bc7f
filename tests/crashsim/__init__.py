"""Crash-state simulation: record a workload's file-system calls, build the states a power loss may leave, check each (see README.md)."""
