r"""The paper itself: what it \input{}s, its generated conclusions, and the check of the built PDF."""
