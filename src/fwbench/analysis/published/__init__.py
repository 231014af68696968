"""The paper's published-vs-reproduced section: each published figure beside the matching cell of this study."""
