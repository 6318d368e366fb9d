"""What is true now, beside the change chains of `services/recall/time.py` (`current_truth`): a person's later
statement of the same kind first, or for the past their earlier one (`later`); the first statement standing after
a change only considered is called off, or after a return to what was before, and a plain statement above a change
only considered (`stands`); an update kept though the question's words miss it (`updates`)."""
