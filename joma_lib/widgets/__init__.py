"""ipywidgets panels that let readers vary each theorem's knobs (they need a live kernel)."""
