"""The app's screens: the queue, a proposal's review, and the dialogs over them."""
