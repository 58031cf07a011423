"""Links from a lower app to the pages of the apps above it, which it may not name: the lower app
gives each page it links to a name of its own (`PageLinks("the books", ("journal", ...))`), and
the app that owns the page registers it under that name from its AppConfig.ready()
(`register("journal", lambda: reverse("finance-journal"))`). A page no app registered is "" (a
page shows no link then)."""

from __future__ import annotations

from collections.abc import Callable


class PageLinks:
    """The pages one app links to, by its own names for them, and who registered each."""

    def __init__(self, owner: str, names: tuple[str, ...]) -> None:
        self.owner, self.names = owner, names
        self._builders: dict[str, Callable[..., str]] = {}

    def register(self, name: str, builder: Callable[..., str]) -> None:
        """The path of the page `name`: `builder(**kwargs)`."""
        self._known(name)
        self._builders[name] = builder

    def link(self, name: str, **kwargs: str) -> str:
        """The path of the registered page, "" where no app registered one."""
        self._known(name)
        builder = self._builders.get(name)
        return builder(**kwargs) if builder else ""

    def _known(self, name: str) -> None:
        if name not in self.names:
            raise ValueError(f"{self.owner} link to no page {name!r}: one of {', '.join(self.names)}")
