"""The sweep: its driver, phases, scheduling, tasks, winners, time and budget."""
