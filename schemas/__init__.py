"""Message contracts of streamforest's topics and their wire codec."""
