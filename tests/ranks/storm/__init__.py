"""The storm: a randomized differential test of the engine.

Every rank generates the same plan of collective ops from a seed (plan.py), makes every rank's
inputs from the seed too (data.py), runs the plan against the engine and checks each result
against numpy (model.py). README.md, "Testing the engine", says how to run and replay one.
"""
