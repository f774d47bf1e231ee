"""A sweep's progress that keeps what it says, for tests that read it."""

from tuner.sweep.progress import Progress


class Notes(Progress):
    def __init__(self):
        self.notes = []

    def note(self, text):
        self.notes.append(text)
