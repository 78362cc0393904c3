"""Dropout, in one place: the rates by site a spec holds (`rates`: a model's one `dropout`, or a
rate of its own where a reference model has one) and the masks drawn with them (`masks`: torch's
semantics, drawn faster on CPU). Nothing is imported here, so a spec's rates load without torch."""
