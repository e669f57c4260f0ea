"""Speculative decoding physics: the op lists of a draft-and-verify step (``ops``) and their cost in a static
batch (``decode``). Core (``roofline.predict``) uses it; the serving simulator and planner build on it."""
