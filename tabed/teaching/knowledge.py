"""What the teaching world knows without a picture: countries and animals with several facts each, lists, and
words to spell. Thirty of the countries are invented (names and facts drawn once at random, fixed here),
and the drafter is never taught them (`train.Recipe.invented_countries`), as a small drafter is taught
less than its target: their facts are where its drafts miss, for M and T alike."""

from __future__ import annotations

from dataclasses import dataclass

from .scenes import COLOURS, SHAPES, WORDS


@dataclass(frozen=True)
class Country:
    name: str
    capital: str
    continent: str
    language: str
    millions: int  # people, in millions (rounded)


@dataclass(frozen=True)
class Animal:
    name: str
    legs: int
    sound: str
    home: str
    food: str
    covering: str
    kind: str  # mammal, bird, ...


REAL_COUNTRIES = tuple(Country(*row) for row in (
    ("France", "Paris", "Europe", "French", 68), ("Italy", "Rome", "Europe", "Italian", 59),
    ("Spain", "Madrid", "Europe", "Spanish", 48), ("Germany", "Berlin", "Europe", "German", 84),
    ("Greece", "Athens", "Europe", "Greek", 10), ("Norway", "Oslo", "Europe", "Norwegian", 5),
    ("Portugal", "Lisbon", "Europe", "Portuguese", 10), ("Poland", "Warsaw", "Europe", "Polish", 37),
    ("Sweden", "Stockholm", "Europe", "Swedish", 10), ("Austria", "Vienna", "Europe", "German", 9),
    ("Ireland", "Dublin", "Europe", "English", 5), ("Hungary", "Budapest", "Europe", "Hungarian", 10),
    ("Japan", "Tokyo", "Asia", "Japanese", 124), ("China", "Beijing", "Asia", "Chinese", 1410),
    ("Thailand", "Bangkok", "Asia", "Thai", 70), ("Vietnam", "Hanoi", "Asia", "Vietnamese", 99),
    ("India", "Delhi", "Asia", "Hindi", 1430), ("Korea", "Seoul", "Asia", "Korean", 52),
    ("Nepal", "Kathmandu", "Asia", "Nepali", 30), ("Iran", "Tehran", "Asia", "Persian", 89),
    ("Egypt", "Cairo", "Africa", "Arabic", 112), ("Kenya", "Nairobi", "Africa", "Swahili", 55),
    ("Ghana", "Accra", "Africa", "English", 34), ("Morocco", "Rabat", "Africa", "Arabic", 37),
    ("Senegal", "Dakar", "Africa", "French", 18), ("Ethiopia", "Addis Ababa", "Africa", "Amharic", 126),
    ("Peru", "Lima", "South America", "Spanish", 34), ("Chile", "Santiago", "South America", "Spanish", 20),
    ("Brazil", "Brasilia", "South America", "Portuguese", 216), ("Colombia", "Bogota", "South America", "Spanish", 52),
    ("Canada", "Ottawa", "North America", "English", 40), ("Mexico", "Mexico City", "North America", "Spanish", 128),
    ("Cuba", "Havana", "North America", "Spanish", 11), ("Australia", "Canberra", "Oceania", "English", 27),
    ("Fiji", "Suva", "Oceania", "English", 1), ("Samoa", "Apia", "Oceania", "Samoan", 1),
))
INVENTED_COUNTRIES = tuple(Country(*row) for row in (
    ("Briavia", "Fengate", "South America", "Swahili", 52), ("Briora", "Pelburg", "Europe", "Hindi", 83),
    ("Doravia", "Zanwick", "South America", "French", 26), ("Halith", "Halmouth", "Europe", "Arabic", 58),
    ("Halora", "Fenburg", "Asia", "Spanish", 45), ("Halura", "Lumgate", "North America", "French", 15),
    ("Kesonde", "Briville", "Europe", "Polish", 21), ("Kesundi", "Melholm", "North America", "Spanish", 48),
    ("Kesura", "Garford", "North America", "French", 11), ("Linania", "Tanburg", "Asia", "Polish", 50),
    ("Linavia", "Dormouth", "Asia", "German", 46), ("Linesta", "Halgate", "North America", "Portuguese", 62),
    ("Lumonde", "Sarstad", "Europe", "Spanish", 64), ("Melelia", "Torville", "South America", "Hindi", 63),
    ("Melora", "Quengate", "Africa", "Spanish", 20), ("Moravia", "Halstad", "Europe", "Portuguese", 35),
    ("Moronde", "Tanport", "South America", "English", 68), ("Morura", "Melford", "Europe", "Arabic", 69),
    ("Quenesta", "Velgate", "Africa", "English", 90), ("Quenith", "Melmouth", "North America", "French", 69),
    ("Ravavia", "Gargate", "Africa", "Spanish", 35), ("Sarith", "Pelport", "North America", "Portuguese", 23),
    ("Sarolen", "Nolgate", "Africa", "Arabic", 70), ("Sarora", "Ravport", "North America", "Greek", 44),
    ("Tanania", "Tanholm", "Oceania", "Arabic", 80), ("Tanura", "Dorgate", "Asia", "Arabic", 53),
    ("Toraria", "Oststad", "Oceania", "Arabic", 27), ("Torura", "Briburg", "North America", "Hindi", 47),
    ("Zanania", "Lumhaven", "Oceania", "French", 5), ("Zanonde", "Quenmouth", "Africa", "Hindi", 35),
))
COUNTRIES = REAL_COUNTRIES + INVENTED_COUNTRIES

ANIMALS = tuple(Animal(*row) for row in (
    ("cat", 4, "meow", "house", "fish", "fur", "mammal"), ("dog", 4, "woof", "house", "meat", "fur", "mammal"),
    ("cow", 4, "moo", "farm", "grass", "hair", "mammal"), ("sheep", 4, "baa", "farm", "grass", "wool", "mammal"),
    ("horse", 4, "neigh", "farm", "hay", "hair", "mammal"),
    ("pig", 4, "oink", "farm", "scraps", "skin", "mammal"),
    ("goat", 4, "bleat", "mountains", "leaves", "hair", "mammal"),
    ("donkey", 4, "bray", "farm", "hay", "hair", "mammal"),
    ("hen", 2, "cluck", "farm", "seeds", "feathers", "bird"),
    ("duck", 2, "quack", "pond", "weeds", "feathers", "bird"),
    ("goose", 2, "honk", "lake", "grass", "feathers", "bird"),
    ("owl", 2, "hoot", "forest", "mice", "feathers", "bird"),
    ("crow", 2, "caw", "city", "seeds", "feathers", "bird"),
    ("dove", 2, "coo", "city", "seeds", "feathers", "bird"),
    ("snake", 0, "hiss", "desert", "mice", "scales", "reptile"),
    ("bee", 6, "buzz", "hive", "nectar", "hair", "insect"),
    ("cricket", 6, "chirp", "field", "leaves", "shell", "insect"),
    ("frog", 4, "croak", "pond", "insects", "skin", "amphibian"),
    ("lion", 4, "roar", "savanna", "meat", "fur", "mammal"),
    ("wolf", 4, "howl", "forest", "meat", "fur", "mammal"),
    ("bear", 4, "growl", "forest", "berries", "fur", "mammal"),
    ("mouse", 4, "squeak", "field", "seeds", "fur", "mammal"),
    ("elephant", 4, "trumpet", "savanna", "grass", "skin", "mammal"),
    ("monkey", 4, "chatter", "jungle", "fruit", "fur", "mammal"),
))

DAYS = ("Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday")
MONTHS = ("January", "February", "March", "April", "May", "June", "July", "August", "September",
          "October", "November", "December")
LETTERS = "abcdefghijklmnopqrstuvwxyz"
SPELL_WORDS = WORDS + tuple(animal.name for animal in ANIMALS) + tuple(COLOURS) + SHAPES
