"""Use cases: what the command line (and any other front end) asks flask-eval to do."""
