"""The CR² method: teacher, margin gate, utilities, the routing rule, operating targets, certification."""
