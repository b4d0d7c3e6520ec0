"""What every chapter shares: profiles, data, models, the one training loop, verdicts, errors
and the charts' style. Nothing here starts a process; `ranks` does that.
"""
