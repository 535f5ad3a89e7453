"""Table 1's configuration search, as the "Checks and audit" appendix shows it."""

from __future__ import annotations

from joma_lib.theory.table1.exploration import EXPLORED, read_explorations, select_configuration


def exploration_markdown() -> str:
    """Every explored Table 1 configuration (:data:`joma_lib.theory.table1.exploration.EXPLORED`) with the stored
    outcome that the selection rule reads, as a Markdown table; the selected one in bold."""
    explored = read_explorations()
    chosen = select_configuration(explored)
    lines = ["| configuration | M | MLP width | classes | untrained layer-0 score per setting | final loss per setting "
             "| CPU s | selected |", "|---|---|---|---|---|---|---|---|"]
    for name, config in EXPLORED.items():
        e = explored.get(name)
        cells = (["not run"] * 3 if e is None else
                 [", ".join(f"{v:.2f}" for v in e.init_layer0), ", ".join(f"{v:.3f}" for v in e.final_loss),
                  f"{e.cpu_seconds:.0f}"])
        label = f"**{name}**" if name == chosen else name
        lines.append(f"| {label} | {config.n_vocab} | {config.d_hidden} | {config.n_class} | " + " | ".join(cells)
                     + f" | {'yes' if name == chosen else 'no'} |")
    return "\n".join(lines)

