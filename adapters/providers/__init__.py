"""adapters/providers"""
