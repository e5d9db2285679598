"""What a person touches: the ``quicksilver`` command line and the Textual app."""
