"""Shared pieces of the GUI domains (web, os, android): screen trees (``uitree``),
pyautogui-style and tool-style action calls (``calls``) and grounding on a screen
(``ground``). Private to ``simgym.domains``; other packages use the domains."""
