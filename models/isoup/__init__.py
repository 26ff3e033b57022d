"""iSOUP-Tree and the iSOUP-SymRF forest: multi-target regression."""
