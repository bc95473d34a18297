"""What results share to show themselves in a notebook."""


class Printable:
    """Results that show their text (``str``) in a notebook and at the prompt."""

    def __repr__(self) -> str:
        return str(self)

    def _repr_pretty_(self, printer, cycle) -> None:  # IPython display
        printer.text(str(self))
