"""`agentfs ui`: a local web page to see, compare and steer what agents did (the extra `ui`)."""
