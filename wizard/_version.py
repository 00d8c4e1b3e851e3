__version__ = "0.1.0"
# The verl release whose config tree and checks verl-init targets.
VERL_TARGET = "0.9.1"
