"""The Online Random Forest (Saffari 2009) and its online importances."""
