"""Training: one recipe, one loop, a trainer per framework behind one interface."""
