"""The CR² method: teacher, margin gate, utilities, the routing rule, operating targets, certification;
the torch modules' checkpoints and fingerprints (checkpoint) and their parameter and FLOP counts (complexity)."""
