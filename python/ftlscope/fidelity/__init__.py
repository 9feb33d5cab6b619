"""How closely the simulated presets reproduce the drives they are shaped after.

- :mod:`.published` holds every number the source documents publish for those drives, with where it came
  from and the document's words, and the qualitative shapes they describe.
- :mod:`.measure` re-measures each of them on the preset, on the simulator's virtual clock.

``bench/fidelity.py`` prints the comparison.
"""
