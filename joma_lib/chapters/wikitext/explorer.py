"""The kernel-free explorer of the wikitext page, drawn from its grid figure's data."""

from __future__ import annotations




import numpy as np
from matplotlib.colors import to_hex

from joma_lib.kit.explorer import Axes, Control, Explorer, Trace
from joma_lib.kit.registry import FigureData
from joma_lib.kit.sweeps import layer_colours

from joma_lib.chapters.wikitext.figures import WIKITEXT_SOURCES




def wikitext_explorer(data: FigureData) -> Explorer:
    """Explorer of ``c-wikitext-grid``: entropy of every layer, and the validation loss, against the minibatch."""
    nlayers, lrs = data["nlayers"], data["lrs"]
    n_layers = int(nlayers.max())
    shape = (len(WIKITEXT_SOURCES), nlayers.size, lrs.size)
    steps_k = np.broadcast_to((data["minibatch"] / 1000.0)[:, None, None, :], shape + (data["minibatch"].shape[1],))
    colours = np.empty(shape + (n_layers,), dtype=object)
    titles = np.empty(shape, dtype=object)
    labels = ("the authors' runs (WikiText-2)", "our re-run")
    for index in np.ndindex(shape):
        s, i, j = index
        layers = int(nlayers[i])
        colours[index] = [to_hex(c) for c in layer_colours(layers)] + ["#000000"] * (n_layers - layers)
        setting = f"{layers} layer{'s' if layers > 1 else ''}, lr {lrs[j]:g}"
        if data["n_seeds"][index] == 0:
            trained = ", ".join(f"{int(nlayers[a])} layers at lr {lrs[b]:g}" for a, b in
                                zip(*np.nonzero(data["n_seeds"][s])))
            titles[index] = f"{labels[s]}: no run with {setting}<br>(trained: {trained})"
        else:
            titles[index] = (f"{labels[s]}, {setting}<br>lowest validation loss {data['min_val_loss'][index]:.3f} "
                             f"(mean of {int(data['n_seeds'][index])} seeds)")
    traces = [Trace(y=data["attn_entropy"][..., layer], x=steps_k, name=f"layer {layer}", color=colours[..., layer],
                    panel=0) for layer in range(n_layers)]
    traces.append(Trace(y=data["val_loss"], x=steps_k, name="validation loss", color="#444444", panel=1,
                        style={"line": {"dash": "dash"}}))
    return Explorer(
        controls=(Control("source", "source", WIKITEXT_SOURCES, kind="buttons", labels=labels),
                  Control("layers", "layers", tuple(int(n) for n in nlayers)),
                  Control("lr", "learning rate", tuple(float(lr) for lr in lrs),
                          labels=tuple(f"{lr:.0e}" for lr in lrs))),
        panels=(Axes("minibatch (k)", "attention entropy (nats)"),
                Axes("minibatch (k)", "validation loss (nats / token)")),
        traces=tuple(traces), titles=titles, digits=4,
    )
