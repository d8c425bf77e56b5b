"""Building blocks every answer uses: devices, steps, names, categories, op links, trace facts."""
