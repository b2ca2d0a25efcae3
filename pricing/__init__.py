"""Pricing: price sheets and GPU rates in, dollars out. Pure; imports nothing else of ours."""
