"""loadfleet lab: the web clusters that loadfleet loads in demos and tests."""
