"""The logic behind the commands that are not the sweep: bench, report, revalidate, explain."""
