"""The conversation: wires the audio stages and the engine into one voice loop."""
