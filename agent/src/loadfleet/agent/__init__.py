"""loadfleet agent: connects out to a controller and runs load drivers on this host."""

__version__ = "0.1.0"
