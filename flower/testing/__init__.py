"""Offline testing for flower and for workflows built on it: a scripted fake Messages API."""
