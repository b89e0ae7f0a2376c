"""Use cases of fermix-memory and the ports (Protocols) they need from the outside world."""
