"""Blob trees: values and files written as inline bytes, packed objects or chunk trees over the object database."""
