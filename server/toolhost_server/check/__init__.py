"""`toolhost check`: runs every tool's examples and judges each call against what its example expects.

`cases` picks the examples to run and the ones left out (and why), `expectations` judges one call's outcome,
`rounds` runs them in order, again for those whose call failed while others were still passing. None of it
knows how a call is made: the command hands in a function that makes one (through the gRPC client).
"""
