"""Content-addressed objects: the file codec, the local object database, chunking and blob trees."""
